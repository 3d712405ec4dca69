"""The Python client of ``treestore serve``: ``treestore.connect(URL)`` gives a handle whose
``query(...)`` returns rows with the interface of :class:`~query.driver.result.Rows`, read
from the service's Arrow stream over HTTP (httpx). No Spark and no Java are needed.

Lives here: ``client`` (the handle, the rows, HTTP errors as the exception tree).

May import: ``treestore``.
"""

__all__: list[str] = []
