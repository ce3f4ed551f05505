"""``python -m scholar_es.cli``: the ``scholar-es`` command."""

from scholar_es.cli.app import main

if __name__ == "__main__":
    main()
