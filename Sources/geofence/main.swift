import GeofenceCLI

GeofenceCommand.main()
