"""Full-text search: analyzer (tokens, stop words, stemming, edit distance), postings, BM25.

Design and choices: docs/design/search.md.
"""
