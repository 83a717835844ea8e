from fa_doctor.cli import main

main()
