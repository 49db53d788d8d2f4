"""An embedder's failure as a contract error."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

from app.contract.errors import EngineFailure, EngramError, sanitise

logger = logging.getLogger("engram.embeddings")


@contextlib.contextmanager
def embedder_errors() -> Iterator[None]:
    """Typed errors pass (an endpoint that is down is ``Unavailable``); anything else is the
    embedder's own failure: logged sanitised, answered as an engine error."""
    try:
        yield
    except EngramError:
        raise
    except Exception as error:
        logger.error("embedder failure: %s: %s", type(error).__name__, sanitise(str(error)))
        raise EngineFailure("the embedder failed to embed the text") from None
