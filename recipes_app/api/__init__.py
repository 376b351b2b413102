"""REST API of the recipe catalog (registered in ``aicr_site.api_router`` under ``/api/v1/``)."""
