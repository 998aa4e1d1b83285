"""Models the `dynamo-lite` commands run: the demo now, the graph-break report corpus later."""
