print("band-edge")
