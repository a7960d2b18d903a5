"""What a grade is rendered as, each from the typed records (``core.results``) at the edge:
one submission's report and results.json (``report``), a class's CSV and gradebook exports
(``exports``), its report (``class_report``, the page ``class_page``) and its similar pairs
(``similarity``, ``fingerprint``); ``inert`` makes the students' text inert in all of them."""
