module taskq

go 1.19
