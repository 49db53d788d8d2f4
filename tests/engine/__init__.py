# Transitional: the PostgreSQL engine's tests still call items' and filters' ``validate()``, the old name of
# ``checked()``. Removed once they call ``checked()``.
from app.contract.items import Conversation, Document, Learning
from app.contract.meta import Filter

for _model in (Document, Conversation, Learning, Filter):
    _model.validate = _model.checked  # type: ignore[assignment,method-assign]
