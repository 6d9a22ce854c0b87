"""More pages of the pipeline (/tokens, /embeddings, /training, /kv-cache, /scale, /tour).

Add routes here; ``app.pages.render_page`` renders a template with the shared layout and strings.
"""

from __future__ import annotations

from fastapi import APIRouter

router = APIRouter()
