"""verl-parl text browser: the gpt-oss browser interface as one session tool, ``browser``.

* :mod:`verl_parl_browser.session` — the page stack: ``search``, ``open`` (link id, docid or URL, with
  cursor and line window), ``find``; numbered wrapped lines, links as ``【id†text】``, citations as
  ``【cursor†Lstart-Lend】``;
* :mod:`verl_parl_browser.tool` — the registered ``browser`` tool (one function, ``action`` picks
  search/open/find) with one session per trajectory;
* :mod:`verl_parl_browser.web` — URLs over httpx behind a host allow-list (loopback by default);
* :mod:`verl_parl_browser.convert` — HTML through html2text, links numbered;
* :mod:`verl_parl_browser.js` — optional JavaScript rendering, Playwright driving Debian's Chromium
  (extra ``js``).
"""

from __future__ import annotations
