"""The views. Importing the package first makes flask-smorest's documentation copies share schemas
(``app.blueprints.doc_copies``): every module here decorates views at import."""

from app.blueprints.doc_copies import share_schemas_in_doc_copies

share_schemas_in_doc_copies()
