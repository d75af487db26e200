"""Profile readers, one module per format. `contract` holds what they share (and imports none of them);
`registry` lists them in the order they are tried."""
