module faultload/router

go 1.24

require github.com/valyala/fastjson v1.6.10
