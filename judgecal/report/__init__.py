"""Pure table building and renderers (terminal, JSON, Markdown, HTML, PNG)."""
