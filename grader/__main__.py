from .integrations.routes.cli import run

run()
