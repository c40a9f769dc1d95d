"""Output: one module per format (text, json, github, sarif), plus the diff and the
run summary they share. The only place that turns results into text; nothing here
migrates, reads or writes source files.
"""
