from tracecanary.cli import main

raise SystemExit(main())
