from clusterbench.ray._cli import main

main()
