"""One module per page: its HTML route, JSON routes, request schemas and figure builders."""
