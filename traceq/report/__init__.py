"""Report model and renderers (text, JSON, HTML): they draw what the analyses computed."""
