"""What one translation looked like inside, as plain data the pages read: the recorded pass and
the questions asked of it, the trace, the x-ray, the KV cache, logit lens and attributions."""
