"""BentoML entry point for a bento (`toolkit bento DIR`, `make bento ARTIFACT=DIR`).

The service lives in the library (`toolkit.deploy.serving`) so that `toolkit serve`, the tests
and the bento run one implementation. `toolkit bento` copies this file, the artifact (as
./artifact) and a bentofile it writes into a build context; settings come from TOOLKIT_*
environment variables.
"""

from toolkit.deploy.serving import Extraction  # noqa: F401  (BentoML finds the service here)
