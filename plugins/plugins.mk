# plugins: each plugins/<kind>/<name>/ has a fragment included here
