"""One renderer per output format over a scan's result: JSON, SARIF, JUnit, GitHub, HTML."""
