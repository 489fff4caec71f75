"""verl-parl text browser (work in progress): the gpt-oss browser interface over the local corpus.

Done: :class:`~verl_parl_browser.session.BrowserSession` — ``search``, ``open`` (by link id or docid,
with cursor and line window), ``find``; a page stack addressed by cursor;
numbered wrapped lines; links shown as ``【id†text】``. Not yet: the registered tool (it needs one
session per trajectory), the HTTP backend, html2text, JavaScript rendering.
"""

from __future__ import annotations
