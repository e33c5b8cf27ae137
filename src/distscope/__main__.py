from distscope.cli import main

main()
