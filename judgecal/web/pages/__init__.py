"""The pages of ``judgecal serve``, one module per page (or pair of pages): each holds a mixin of
:class:`judgecal.web.app.App` whose method parses the page's query, calls the view function the
CLI calls and renders the result; :mod:`judgecal.web.app` routes to them and keeps the cache,
the error pages and the token guard."""
