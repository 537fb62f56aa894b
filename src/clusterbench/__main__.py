from clusterbench.entry import main

main()
