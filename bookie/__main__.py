import sys

from bookie.cli import main

sys.exit(main())
