"""The smoke suite: reference models run on every EP a wheel claims, proven from ORT's profile."""
