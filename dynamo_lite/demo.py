"""`python -m dynamo_lite.demo`: runs corpus/demo.py (user-side code lives outside dynamo_lite,
whose own frames are never captured)."""
from corpus.demo import main

if __name__ == "__main__":
    main()
