"""A drop-in for aicrd's recipe API (``api/aicr/v1/server.yaml``): ``/v1/recipe`` and ``/v1/query``.

Existing AICR clients can point at this site instead of an aicrd server: the same query
parameters and ``RecipeCriteria`` / ``QueryRequest`` bodies, the same RecipeResult JSON, and
errors in aicrd's envelope ``{code, message, details, requestId, timestamp, retryable}`` with
AICR's own messages. Criteria resolve against the current catalog version through
``recipes_app.services``; nothing here writes to the database.

Modules: ``errors`` (the envelope), ``inputs`` (bounded body and parameter parsing),
``hydrate`` (the hydrated recipe and dot-path selector behind ``/v1/query``), ``views``.
"""
