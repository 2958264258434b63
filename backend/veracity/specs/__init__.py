"""Research templates ("specs") as validated data: the spine the planner, checks and pages all read."""
