from fa_doctor.entry import main

main()
