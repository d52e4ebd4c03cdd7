"""BentoML entry point for `bentoml serve` / `bentoml build` from this folder.

The service lives in the library (`toolkit.deploy.serving`) so that `toolkit serve`, the tests
and this bento run one implementation. Settings come from environment variables;
TOOLKIT_ARTIFACT names the artifact directory made by `toolkit export`.
"""

from toolkit.deploy.serving import Extraction  # noqa: F401  (BentoML finds the service here)
