"""The bottom floor: what every package may use and that knows none of them (the HTML page renderer)."""
