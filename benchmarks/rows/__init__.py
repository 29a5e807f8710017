"""The work the side-by-side runner (python -m benchmarks) times: the rows of its tables, each
one piece of work as one statement per column, and the issue's targets some rows carry. The
statements name the inputs that peers.build_inputs makes.

One module per table: table.py holds what every row is (Row, Target, the columns and their
headings); main.py the main table (export, import, consume, round trip, allocation, copy);
exchange.py, frameworks.py, way_out.py, scaling.py and tensor.py one table each.
"""
