"""Test and benchmark helpers that ship in the package because ``make bench`` needs them too."""
