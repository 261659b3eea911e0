from abricot_local.cli import main

main()
