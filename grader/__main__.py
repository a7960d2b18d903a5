from .integrations.cli import main

raise SystemExit(main())
