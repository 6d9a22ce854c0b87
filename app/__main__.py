"""``python -m app [--host H] [--port P] [--checkpoint DIR] [--workers N]``."""

from app.cli import serve

serve()
