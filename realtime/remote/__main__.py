import sys

from realtime.remote.cli import main

sys.exit(main())
