"""Other models and engines in the same shape: Hugging Face Marian models, choosing the model at
start-up, and the CTranslate2 copy that drafts greedy translations."""
