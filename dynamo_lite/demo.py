"""`python -m dynamo_lite.demo`: runs dynamo_lite_corpus/demo.py (user-side code lives outside dynamo_lite,
whose own frames are never captured)."""
from dynamo_lite_corpus.demo import main

if __name__ == "__main__":
    main()
