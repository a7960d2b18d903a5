from .integrations.cli import leave, main

leave(main())
