from .integrations.routes.cli import leave, main

leave(main())
