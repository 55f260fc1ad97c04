"""One module per runner: framework glue only (its loop, its native cap, its bare loop).

A module whose name starts with an underscore is a helper layer two runners of one framework family share.
"""
